"""What every face calls: start, resume, queue and work runs; review decisions on runs, trees and tool
calls; labels; listings. One function per verb, so the CLI, the TUI and the Python API agree.

Imports the engine, attribution and everything below; never a face.
"""
