"""Helpers shared by test modules: plain functions and classes, no fixtures.

Test modules import from here (or from a fixture module's helpers), never from
another test module.
"""
