"""Fix recipes: a finding becomes a plan (diffs, modes, argv commands, manual steps)."""
