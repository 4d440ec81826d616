"""The package version, in a module of its own: the run metadata, the HTML report and the CLI
read it without importing the package's public facade (which sits at the top of the layers)."""

__version__ = "0.1.0"
