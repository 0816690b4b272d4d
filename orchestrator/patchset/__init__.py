"""The patch series: its model, its rendering into another layout (the layouts themselves are in
model/layout.py), its files."""
