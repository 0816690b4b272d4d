"""The shared model, a leaf: the value types (declared once), the results records (results.json)
and the layouts. Every other package may import it; it imports only the base modules errors.py,
records.py and untrusted.py (no package of the tool), so no import cycle can run through it."""
