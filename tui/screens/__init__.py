"""The review app's screens: runs list, one run, output editor, and the reject/label dialogs."""
