"""The ``draxr`` commands, one module each: ``register`` adds its flags, the handler runs it."""
