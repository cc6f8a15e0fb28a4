"""System checks for Countersign's configuration."""

from __future__ import annotations
