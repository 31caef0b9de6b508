"""Where libraries are under output_base/external: one walk, and its cache."""
