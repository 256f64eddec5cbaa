"""Static properties of the notebooks: no outputs, the set-up cell and its repository address."""

import nbformat

from qkv_course.config import ROOT, release_tag, repository_url


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def test_solution_notebooks_carry_no_outputs():
    for nb_path in (ROOT / "solutions").glob("*/*.ipynb"):
        nb = nbformat.read(str(nb_path), as_version=4)
        assert all(not c.get("outputs") and c.get("execution_count") is None
                   for c in nb.cells if c.cell_type == "code"), nb_path


def test_setup_cell_installs_the_chapters_release_from_the_configured_repository():
    url = repository_url()
    for folder in ("solutions", "exercises"):
        for nb_path in (ROOT / folder).glob("*/*.ipynb"):
            setup = nbformat.read(str(nb_path), as_version=4).cells[1]
            assert _grade_id(setup) == "setup" and setup.metadata["nbgrader"]["locked"]
            # The release the chapters' Colab copies install (tests/test_notebooks.py), not main.
            assert f'"qkv @ git+{url}@{release_tag()}"' in setup.source, nb_path
            assert 'os.environ.get("NBGRADER_EXECUTION")' in setup.source
