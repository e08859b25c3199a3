"""What the service does with records: walks, audit, keys, forgetting, privacy, signing."""
