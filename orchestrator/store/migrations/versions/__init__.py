"""Migration scripts, one revision per module (a package so that installs ship them)."""
