"""The MoE plan tests' reading of a compiled plan (plan.txt, as --explain-fusion writes it) and of
its report (--report-json), for the checks in moe_plans.sh (on PYTHONPATH there)."""
import json
import re


def plan(path):
    """The plan's text and its groups: the text split at each group's heading, up to the packs."""
    text = open(path).read()
    return text, re.split(r'\n  group ', text.split('\nindependent packs')[0])


def holding(groups, *names):
    """The groups whose text holds every one of `names`."""
    return [g for g in groups if all(n in g for n in names)]


def memory_intensive(report_path):
    """The report's count of memory-intensive kernels."""
    return json.load(open(report_path))['memory_intensive_kernels']
