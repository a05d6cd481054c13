"""Language models: vendor chat models behind "provider:model" specs, retries, fallbacks and the reply cache
(models.py, cache.py), the bundled local SmolLM2 (local.py), the JSON action protocol for models without native
tool calling (protocol.py), quote mode (extractive.py) and the scripted model tests drive the agent with
(testing.py). This package is the only place vendor integrations are imported."""
