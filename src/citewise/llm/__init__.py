"""Language models: vendor chat models behind "provider:model" specs, retries, fallbacks and the reply cache
(models.py, cache.py), the bundled local SmolLM2 (local.py), the JSON action protocol for models without native
tool calling (protocol.py) and the scripted model tests drive the agent with (testing.py). Only the agent uses this
package, and it is one of the two places vendor integrations are imported (the other: index/embeddings.py)."""
