"""Background workers started by the lifespan."""
