"""SQL plumbing shared by the memory and approval stores."""
