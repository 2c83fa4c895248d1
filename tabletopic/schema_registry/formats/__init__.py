"""Schema formats: parsing, canonical forms and compatibility, one module per format."""
