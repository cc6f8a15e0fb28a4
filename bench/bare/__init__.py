"""Bare baselines for B6: a startproject-like Django ASGI app and a one-task Celery app."""
