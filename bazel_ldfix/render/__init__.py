"""Every output for people (text) and for scripts (JSON, ``"version": 1``): one module per
command or result it renders, over what they share (:mod:`.common`)."""
