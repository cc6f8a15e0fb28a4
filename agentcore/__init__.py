"""Countersign's protocol core and tool runtime. Imports no Django and no provider SDK.

Modules: ``events`` (AG-UI types), ``stream`` (the streaming-pattern state machine),
``tools`` (the tool contract), ``arguments`` (parse, validate, repair), ``content``
(content parts), ``dispatch`` (executing a batch of calls), ``loop`` (the agent loop)
and ``providers`` (model adapters, imported lazily).
"""
