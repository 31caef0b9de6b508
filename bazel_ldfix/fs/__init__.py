"""File-system facts at the bottom of every layer: the memo of one command, the facts it
keeps while it watches, and the mount table."""
