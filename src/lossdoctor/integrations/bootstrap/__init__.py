"""The directory `lossdoctor run` puts first on the script's PYTHONPATH (its `sitecustomize`)."""
