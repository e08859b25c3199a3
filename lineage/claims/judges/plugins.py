"""Which judge runs: the offline rules, the OpenAI-compatible grader, or an operator's own.

An operator plugs in an NLI model or an LLM they host by installing a package that declares an
entry point in the group ``lineage.judges``::

    [project.entry-points."lineage.judges"]
    my-nli = "my_package.judge:make_judge"

The entry point is a callable that takes no arguments and returns a judge: an object with
``name``, ``version`` and ``async judge(premise, hypothesis) -> Judgement`` (see ``Judge``).
``LINEAGE_CLAIM_JUDGE=my-nli`` then makes verification use it.
"""

from importlib.metadata import entry_points
from typing import Final

from lineage.claims.judges.base import Judge
from lineage.claims.judges.llm import OpenAICompatibleJudge
from lineage.claims.judges.offline import OfflineJudge
from lineage.core.errors import BadParameter
from lineage.settings import Settings

ENTRY_POINT_GROUP: Final = "lineage.judges"
BUILT_IN: Final = ("offline", "openai")


def installed_judges() -> list[str]:
    return sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


def judge_from_settings(settings: Settings) -> Judge:
    """The judge `settings.claim_judge` names; BadParameter naming the choices otherwise."""
    name = settings.claim_judge
    if name == "offline":
        return OfflineJudge()
    if name == "openai":
        if not settings.judge_base_url or not settings.judge_model:
            raise BadParameter(
                "claim_judge=openai needs LINEAGE_JUDGE_BASE_URL and LINEAGE_JUDGE_MODEL"
            )
        key = settings.judge_api_key.get_secret_value() if settings.judge_api_key else None
        return OpenAICompatibleJudge(settings.judge_base_url, settings.judge_model, key)
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        choices = ", ".join([*BUILT_IN, *installed_judges()])
        raise BadParameter(
            f"claim_judge {name!r} is neither built in nor an installed {ENTRY_POINT_GROUP} "
            f"entry point; choose one of {choices}"
        )
    judge = found[0].load()()
    missing = [a for a in ("name", "version", "judge") if not hasattr(judge, a)]
    if missing:
        raise BadParameter(
            f"the {ENTRY_POINT_GROUP} entry point {name!r} returned {type(judge).__name__}, "
            f"which lacks {', '.join(missing)}"
        )
    checked: Judge = judge
    return checked
