"""Widgets of the review app. They display what they are given and post messages; they never
touch the store or decide anything."""
