"""Command line: `lossdoctor diagnose PATH` and `lossdoctor demo`."""
