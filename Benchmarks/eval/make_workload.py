#!/usr/bin/env python3
"""Writes the eval benchmark's workload: policy clauses with labels, their schema and instructions.

Each clause is composed from a group, a condition that may act as a proxy for a protected trait,
an effect (expands, restricts or neutral) and a benefit, with a seeded generator, so the file is
the same on every run. The labels (targetGroup, effectDirection) are what the clause was composed
from: `plinth eval --label targetGroup --label effectDirection` scores the model against them.

    python3 Benchmarks/eval/make_workload.py [--records 600] [--seed 7] [--out PATH]

With --out only the records are written, to PATH (the first 600 of a seed are its 600-record file).
"""
import argparse
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))

GROUPS = {
    "older adults": ["Applicants over the age of 65", "Residents aged 70 or older", "Retired persons above pension age"],
    "low-income households": ["Households earning under 30,000 dollars per year", "Families below the poverty line",
                              "Residents receiving income support"],
    "tenants": ["Tenants who rent their primary residence", "Renters in subsidized buildings", "Lessees of public housing units"],
    "students": ["Students enrolled part-time", "Full-time university students", "Pupils in secondary schools"],
    "veterans": ["Veterans with a service-connected disability", "Former members of the armed forces", "Reservists returning from deployment"],
    "immigrants": ["Recent immigrants", "Permanent residents who arrived within the last three years", "Asylum seekers awaiting a decision"],
    "people with disabilities": ["Persons with a registered disability", "Wheelchair users", "Residents with a chronic illness"],
    "workers": ["Seasonal agricultural workers", "Employees of small businesses", "Gig economy drivers"],
    "parents": ["Single parents", "Parents of children under five", "Foster parents"],
    "people with criminal records": ["Applicants with a prior felony conviction", "People released from prison within two years",
                                     "Persons on probation"],
}
CONDITIONS = [
    ("residing in zip codes 60601 to 60620", "zip code"),
    ("whose primary language is not English", "primary language"),
    ("with a credit score below 600", "credit score"),
    ("with gaps in their employment history", "employment history"),
    ("living in designated neighborhoods", "neighborhood"),
    ("without a fixed home address", "home address"),
    ("whose surname appears on the watch register", "surname"),
    ("who attended schools in the eastern district", "school district"),
    (None, None),
    (None, None),
]
EFFECTS = {
    "expands": ["shall receive priority access to", "qualify for an additional grant toward", "are entitled to free",
                "may apply for expanded"],
    "restricts": ["may be denied access to", "are ineligible for", "shall be excluded from", "must forfeit their"],
    "neutral": ["must register before using", "shall be notified in writing about changes to", "will be surveyed about",
                "are counted separately in reports on"],
}
BENEFITS = ["publicly funded housing units", "school meal programs", "public transit passes", "unemployment benefits",
            "childcare subsidies", "municipal job training", "health clinic services", "small business loans",
            "energy bill assistance", "library and community center memberships"]
TAILS = ["", " starting next fiscal year", " as determined by the housing authority", " unless a waiver is granted by the council",
         " for a period of up to twelve months", " subject to annual review"]

INSTRUCTIONS = ("Classify the policy clause. targetGroup: the group of people it affects. effectDirection: whether it "
                "expands or restricts their access to benefits or rights, or is neutral. proxyVariables: up to three "
                "attributes it uses that may stand in for protected traits.")


def schema():
    return {
        "type": "object",
        "properties": {
            "targetGroup": {"type": "string", "enum": sorted(GROUPS)},
            "effectDirection": {"type": "string", "enum": ["expands", "restricts", "neutral"]},
            "proxyVariables": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 3},
        },
        "required": ["targetGroup", "effectDirection", "proxyVariables"],
        "additionalProperties": False,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=600)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", help="write only the records, here")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with open(args.out or os.path.join(HERE, "policy_clauses.jsonl"), "w") as f:
        for i in range(args.records):
            group = rng.choice(sorted(GROUPS))
            direction = rng.choice(sorted(EFFECTS))
            condition, proxy = rng.choice(CONDITIONS)
            subject = rng.choice(GROUPS[group]) + (" " + condition if condition else "")
            text = f"{subject} {rng.choice(EFFECTS[direction])} {rng.choice(BENEFITS)}{rng.choice(TAILS)}."
            record = {"id": f"p{i + 1:04d}", "text": text, "targetGroup": group, "effectDirection": direction}
            if proxy:
                record["proxy"] = proxy
            f.write(json.dumps(record) + "\n")
    if args.out:
        return
    with open(os.path.join(HERE, "policy_clauses.schema.json"), "w") as f:
        json.dump(schema(), f, indent=2)
        f.write("\n")
    with open(os.path.join(HERE, "policy_instructions.txt"), "w") as f:
        f.write(INSTRUCTIONS + "\n")


if __name__ == "__main__":
    main()
