"""Koinii in one minute: write to a knowledge-base file, query it, reopen it.

Run: python examples/quickstart.py [PATH]   (default: a fresh file in a temp folder)
"""

import os
import sys
import tempfile

import koinii


def main(path: str) -> None:
    with koinii.open_kb(path) as kb:
        # Contexts nest: a team's context sees everything the shared context holds.
        kb.assert_("(genlCx CxDeploy CxShared)", "CxUniverse")
        kb.assert_("(usesDatabase ProdCluster Postgres)", "CxShared", creator="AgentAtlas")
        kb.assert_("(runsOn Postgres Debian)", "CxDeploy", creator="AgentBoreas")

        # A rule fires forward; what it derives keeps its justification.
        kb.assert_(
            "(implies (and (usesDatabase ?c ?db) (runsOn ?db ?os)) (dependsOn ?c ?os))", "CxShared"
        )
        print("query   ", kb.query("(dependsOn ?cluster ?os)", "CxDeploy"))

        # Two agents disagree: both claims stand, and the clash is listed.
        kb.assert_("(not (runsOn Postgres Debian))", "CxShared", creator="AgentCiel")
        print("clashes ", [c["handles"] for c in kb.contradictions("CxDeploy")])
        seq = kb.seq

    # Reopen: the records are the truth; handles, belief and seq come back the same.
    with koinii.open_kb(path) as kb:
        print("reopened", kb.stats())
        assert kb.seq == seq
        print("why     ", kb.why(kb.sentexes_matching("(dependsOn ?c ?os)", "?ctx")[0].handle))


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "koinii.db")
    print("knowledge base:", target)
    main(target)
