"""The repair: what tests cannot load, where it is, the merged value; failing open; the rerun."""
