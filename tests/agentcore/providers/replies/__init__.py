"""Each adapter's scripted wire replies (text, tool call, error) and a provider factory."""
