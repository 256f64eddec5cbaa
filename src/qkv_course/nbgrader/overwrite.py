"""Autograding's cell check without the false alarm: "checksum has changed" means a real edit.

Before it runs a submission, ``nbgrader autograde`` puts back every locked cell (the set-up cell
and the test cells) from its gradebook and logs ``Attribute 'checksum' for cell … has changed!``
when the submitted cell differs from it. But ``nbgrader generate_assignment`` saves a cell to the
gradebook *with* its hidden tests and releases it *without* them (nbgrader issue #1961), so every
test cell that hides tests differs in every submission, edited or not, and the line appears for
each of them: a real edit looks the same as nothing.

:class:`OverwriteReleasedCells` compares a locked cell with what students were given (the saved
cell with its hidden-test regions cleared, exactly as ``generate_assignment`` clears them). When
they match, it puts the saved cell back quietly, hidden tests included; anything else goes on to
nbgrader's own check, which logs the line and restores the cell. The fix cannot be made in the
generated notebooks: the gradebook entry is written by the instructor's own
``generate_assignment``, and nbgrader puts hidden tests back only when the checksums differ.

Enable it in ``nbgrader_config.py``, in place of ``OverwriteCells`` (whose settings it keeps)::

    c.Autograde.sanitize_preprocessors = [..., "qkv_course.nbgrader.overwrite.OverwriteReleasedCells", ...]
"""

from __future__ import annotations

from typing import Tuple

from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode
from nbgrader.api import MissingEntry
from nbgrader.preprocessors import ClearHiddenTests, ClearMarkScheme, OverwriteCells


class OverwriteReleasedCells(OverwriteCells):
    """nbgrader's ``OverwriteCells``, silent for a locked cell that is exactly as released."""

    def released_source(self, saved: str) -> str:
        """What students were given for a locked cell: its saved source without hidden tests
        (a test cell) or mark scheme (a task's prompt: the rubric comes back for the grader).

        Args:
            saved: the cell's source as ``generate_assignment`` saved it in the gradebook.

        Returns:
            The source with the hidden-test regions removed by nbgrader's own
            ``ClearHiddenTests`` (with this course's delimiters), as in the release.
        """
        cell = NotebookNode(source=saved, cell_type="code", metadata=NotebookNode())
        # The private method is the one generate_assignment runs: one definition of "cleared".
        ClearHiddenTests(parent=self)._remove_hidden_test_region(cell)
        ClearMarkScheme(parent=self)._remove_mark_scheme_region(cell)
        return cell.source

    def preprocess_cell(self, cell: NotebookNode, resources: ResourcesDict,
                        cell_index: int) -> Tuple[NotebookNode, ResourcesDict]:
        """Put an untouched locked cell back quietly, then run nbgrader's checks on it.

        Args:
            cell: a cell of the submission.
            resources: nbgrader's resources (the gradebook is open while cells are processed).
            cell_index: the cell's position.

        Returns:
            The cell and the resources, as ``OverwriteCells.preprocess_cell`` returns them.
        """
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is not None:
            try:
                saved = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            except MissingEntry:
                saved = None  # nbgrader's own check reports it
            if saved is not None and saved.locked and cell.source == self.released_source(saved.source):
                cell.source = saved.source  # the hidden tests come back; the checksums now agree
        return super().preprocess_cell(cell, resources, cell_index)
