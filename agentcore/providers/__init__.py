"""Model provider adapters behind one interface (:class:`agentcore.providers.base.Provider`).

Adapters import their SDK lazily, so ``import agentcore`` stays cheap.
"""
