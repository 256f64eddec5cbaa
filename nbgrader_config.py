"""nbgrader configuration for the course (run nbgrader from the repository root)."""

c = get_config()  # noqa: F821  (provided by nbgrader)

c.CourseDirectory.root = "."
# Solutions (with answers and hidden tests) are the source; exercises are the release.
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
