"""Table producers: every table the harness writes, from run records to markdown, CSV and LaTeX."""
