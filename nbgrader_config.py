"""nbgrader configuration for the course (run nbgrader from the repository root).

See book/instructors.md for the commands. Everything nbgrader writes while grading
(gradebook.db, submitted/, autograded/, feedback/, downloaded/) is git-ignored.
"""

import os

from qkv_course.nbgrader.provisional import template_dirs

c = get_config()  # noqa: F821  (provided by nbgrader)

# The course directory is the one holding this file (an absolute path, as nbgrader wants).
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "qkv"
# Solutions (with answers and hidden tests) are the source; exercises are the release,
# committed so that students (and Colab) open them straight from the repository.
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
# An assignment's source, solutions/<assignment>/<name>.md, holds the answers: nbgrader must
# never copy it into a release or a submission (nbgrader's own defaults come first).
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.md"]

# Per-cell time limit while autograding. The exercises are small CPU computations (a
# check takes well under a second); the limit is for endless loops, not for slow answers.
c.Execute.timeout = 120
# How long a kernel may take to start (nbconvert's default is 60 s). Grading a class keeps the
# machine busy, and a kernel that starts late is the machine's doing, not the student's: wait
# for it rather than score the whole notebook as an error.
c.Execute.startup_timeout = 300
# A cell that runs out of time is interrupted and recorded as an error; the other cells
# still run and are graded.
c.Execute.interrupt_on_timeout = True
# Once a notebook has run, its outputs are in hand: stop its kernel at once. nbgrader's default
# ("graceful") waits for the kernel's Python, torch loaded, to exit after every notebook: about a
# third of the floor every notebook pays (kernel start and imports; see benchmarks/autograde.py
# --compare and book/instructors.md).
c.Execute.shutdown_kernel = "immediate"

# A test cell a student deleted is put back (and scores zero if its answer is missing).
c.OverwriteCells.add_missing_cells = True

# A student who is not in the gradebook yet is added when their submission is graded.
c.Autograde.create_student = True

# zip_collect: how to map each file of an LMS download (downloaded/<assignment>/archive/) to a
# student. qkv_course's collector reads "<student id>_<notebook>.ipynb", where <notebook> is one
# of the assignment's released notebooks, so ids may hold "_", "-" and "."; a file it cannot map
# stops the collection with an error naming it (nbgrader's own collector would skip it silently
# and the student would get a zero). See book/instructors.md.
c.ZipCollectApp.collector_plugin = "qkv_course.nbgrader.collect.StudentFileCollector"

# Autograding puts back every locked cell (set-up and test cells) from the gradebook. nbgrader's
# own OverwriteCells logs "Attribute 'checksum' ... has changed!" for every test cell with hidden
# tests in every submission (the gradebook keeps them, the release does not: nbgrader #1961);
# the course's version says it only when a student really edited a locked cell. The rest of
# the list is nbgrader's default, in its order.
c.Autograde.sanitize_preprocessors = [
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.DeduplicateIds",
    "nbgrader.preprocessors.OverwriteKernelspec",
    "qkv_course.nbgrader.overwrite.OverwriteReleasedCells",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# Feedback and export: an answer that waits for grading by hand (the written answers) says "Not
# graded yet" on the student's feedback page instead of 0, and grades.csv marks totals that are
# still provisional (columns needs_manual_grading and ungraded_points). See
# src/qkv_course/nbgrader/provisional.py.
c.GenerateFeedback.preprocessors = [
    "qkv_course.nbgrader.provisional.PendingGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
# On an exporter of the feedback's own: set on nbconvert's HTMLExporter, they would also replace
# formgrader's template, and every grading page would fail (TemplateNotFound).
c.GenerateFeedback.exporter_class = "qkv_course.nbgrader.provisional.FeedbackExporter"
c.FeedbackExporter.template_name = "feedback_qkv"
c.FeedbackExporter.template_file = "feedback.html.j2"
c.FeedbackExporter.extra_template_basedirs = template_dirs()  # nbgrader's templates, then the course's
c.ExportApp.plugin_class = "qkv_course.nbgrader.provisional.ProvisionalCsvExport"
