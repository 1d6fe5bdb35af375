"""Attribution: which step caused this outcome, and which steps cause most failures over time."""
