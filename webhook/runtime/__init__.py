"""What a running ``draxr serve`` is made of besides its hooks and its worker: the process that
assembles them, TLS that reloads its certificate, health and metrics endpoints, logging."""
