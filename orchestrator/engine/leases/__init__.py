"""Who executes a run right now: holding a run's lease (``holder``) and renewing every lease of a
process in the background (``keeper``)."""
