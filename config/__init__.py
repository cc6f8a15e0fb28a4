"""Countersign project configuration: settings, URLs, ASGI entry point, Celery app."""

from config.celery import app as celery_app

__all__ = ("celery_app",)
