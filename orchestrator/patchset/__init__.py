"""The patch series: its model, the layouts it is rendered into, its files, its refresh."""
