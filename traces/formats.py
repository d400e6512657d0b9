"""The trace formats :func:`synergy_gym.traces.loader.load_trace` reads (without importing the readers)."""

FORMATS: tuple[str, ...] = ("auto", "philly-csv", "philly-json", "alibaba", "helios")
