"""Step functions of the procurement example: the 23-step story from the source documents.

A requester asks for "500 units of industrial safety gloves, EU delivery within 10 days". The
workflow parses the request, searches a local vendor corpus (``vendors.json``), compares
prices, certifications, delivery and contract terms, and recommends one vendor.

Step 4 (``retrieve_candidates``) is where the seed's failure happens. With the workflow input
``inject_fault: true`` it simulates a stale search index that silently drops the region filter
and ranks by popularity: it returns the right-looking "Nordwind Safety" records, but for North
America, the UK and Singapore instead of the EU. Every later step processes that record set
faithfully and correctly, and the final recommendation is confident (0.97) and wrong
(V-017 Nordwind Safety Inc. instead of V-007 Nordwind Safety GmbH). What catches it:

- the ``min_items`` gate on step 4: only 1 of 4 items has relevance >= 0.7 (need 3);
- the critic ``verify_recommendation``, which checks the drafted recommendation against the
  retrieved record and the requirements (N against N+2) and sees a North American record.

Everything here is offline and deterministic: no clock, no randomness, no network.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from orchestrator.spec.model import GateResult

if TYPE_CHECKING:
    from orchestrator.spec.context import StepContext

HERE = Path(__file__).resolve().parent
CORPUS: dict[str, Any] = json.loads((HERE / "vendors.json").read_text(encoding="utf-8"))
VENDORS: dict[str, dict[str, Any]] = {v["id"]: v for v in CORPUS["vendors"]}
FX_TO_EUR: dict[str, float] = CORPUS["fx_to_eur"]
GROUND_TRUTH: dict[str, Any] = CORPUS["ground_truth"]
DEFAULT_QUERY: str = GROUND_TRUTH["query"]

RELEVANCE_THRESHOLD = 0.7
"""The step-4 quality signal from the seed: at least 3 results above this relevance."""
TOP_K = 5
REPORTING_CURRENCY = "EUR"

REGION_WORDS: list[tuple[str, str]] = [
    (r"\b(eu|europe|european union|eea)\b", "EU"),
    (r"\b(uk|united kingdom|britain|great britain)\b", "UK"),
    (r"\b(us|usa|united states|north america|canada|na)\b", "NA"),
    (r"\b(apac|asia|asia-pacific|australia|singapore|japan)\b", "APAC"),
    (r"\b(latam|latin america|south america)\b", "LATAM"),
    (r"\b(switzerland|swiss|efta|norway)\b", "EFTA"),
]
CATEGORY_WORDS: list[tuple[str, str]] = [
    (r"\bgloves?\b", "safety gloves"),
    (r"\b(goggles?|glasses|eye)\b", "eye protection"),
    (r"\b(helmets?|hard ?hats?)\b", "head protection"),
    (r"\b(vests?|hi-?vis|high-visibility)\b", "hi-vis clothing"),
    (r"\b(boots?|shoes?|footwear)\b", "safety footwear"),
]
# The certification a buyer must insist on, by (category, region); chemical gloves differ.
CERTIFICATIONS: dict[tuple[str, str], list[str]] = {
    ("safety gloves", "EU"): ["EN 388"],
    ("safety gloves", "UK"): ["EN 388"],
    ("safety gloves", "NA"): ["ANSI/ISEA 105"],
    ("eye protection", "EU"): ["EN 166"],
    ("eye protection", "NA"): ["ANSI Z87.1"],
    ("head protection", "EU"): ["EN 397"],
    ("head protection", "NA"): ["ANSI Z89.1"],
    ("hi-vis clothing", "EU"): ["EN ISO 20471"],
    ("hi-vis clothing", "NA"): ["ANSI/ISEA 107"],
    ("safety footwear", "EU"): ["EN ISO 20345"],
    ("safety footwear", "NA"): ["ASTM F2413"],
}
STOPWORDS = {"of", "the", "a", "an", "for", "and", "with", "units", "unit", "pcs", "pieces", "pairs"}
ACCEPTED_PAYMENT_TERMS = {"net 30", "net 45", "net 60"}
ACCEPTED_INCOTERMS = {"DAP", "DDP"}
MIN_WARRANTY_MONTHS = 6


# -- output models, used by `schema` gates ------------------------------------------------------

class Requirements(BaseModel):
    """What the requester needs, normalized: the yardstick every later step measures against."""

    category: str
    product: str
    quantity: int = Field(ge=1)
    region: str
    max_delivery_days: int = Field(ge=1)
    required_certifications: list[str]
    currency: str
    keywords: list[str]


class Recommendation(BaseModel):
    """The final recommendation the requester receives."""

    vendor_id: str = Field(pattern=r"^V-\d{3}$")
    vendor_name: str
    unit_price: float = Field(gt=0)
    currency: str
    delivery_days: int = Field(ge=0)
    confidence: float = Field(ge=0, le=1)
    rationale: str = Field(min_length=20)
    cited_ids: list[str] = Field(min_length=1)


# -- helpers ------------------------------------------------------------------------------------

def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


def _for_next(ctx: StepContext | None) -> list[dict[str, Any]]:
    """What the consuming steps said they need (next-step context injection), echoed for the record."""
    if ctx is None:
        return []
    return [need.to_json() for need in ctx.next_needs]


def _to_eur(amount: float, currency: str) -> float:
    if currency not in FX_TO_EUR:
        raise ValueError(f"no exchange rate for currency {currency!r}; known: {sorted(FX_TO_EUR)}")
    return amount * FX_TO_EUR[currency]


def _by_id(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in items}


def _relevance(record: dict[str, Any], plan: dict[str, Any]) -> float:
    """Relevance in [0, 1]: category 0.40, region 0.35, certifications 0.15, keywords 0.10."""
    filters = plan["filters"]
    score = 0.0
    if record["category"] == filters["category"]:
        score += 0.40
    if record["region"] == filters["region"]:
        score += 0.35
    required = plan.get("required_certifications") or []
    if required:
        score += 0.15 * sum(c in record["certifications"] for c in required) / len(required)
    else:
        score += 0.15
    keywords = plan.get("keywords") or []
    if keywords:
        text = f"{record['name']} {record['product']}".lower()
        score += 0.10 * sum(k in text for k in keywords) / len(keywords)
    return round(score, 3)


def _candidate(record: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
    """A retrieved item: the vendor record without its contract (fetched at step 5) plus a score."""
    item = {k: v for k, v in record.items() if k != "contract"}
    item["score"] = _relevance(record, plan)
    return item


def _strict_search(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The correct search: hard category and region filters, then relevance."""
    filters = plan["filters"]
    hits = [_candidate(v, plan) for v in VENDORS.values()
            if v["category"] == filters["category"] and v["region"] == filters["region"]]
    hits.sort(key=lambda c: (-c["score"], c["id"]))
    return hits[: plan.get("top_k", TOP_K)]


def _stale_index_search(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The injected fault: a stale index that drops the region filter and ranks by popularity.

    It finds the best-matching SKU and returns every record sharing it, most popular first:
    the near-duplicate "Nordwind Safety" vendors of other regions. The relevance scores are
    computed honestly, so they are low for the wrong-region records; nothing else flags them.
    """
    strict = _strict_search(plan)
    if not strict:
        return []
    sku = strict[0]["sku"]
    pool = [v for v in VENDORS.values() if v["sku"] == sku]
    pool.sort(key=lambda v: (-v["rating"], v["id"]))
    return [_candidate(v, plan) for v in pool[: plan.get("top_k", TOP_K)]]


def _composite(total: float, best_total: float, days: int, max_days: int, rating: float) -> float:
    """Cost 50 %, delivery 25 %, rating 25 %."""
    cost = best_total / total if total > 0 else 0.0
    delivery = max(0.0, 1.0 - days / (2 * max_days))
    return round(0.5 * cost + 0.25 * delivery + 0.25 * rating / 5, 4)


# -- steps 1-3: understand the request ----------------------------------------------------------

def parse_request(query: str) -> dict[str, Any]:
    """Step 1: pull quantity, product, region and deadline out of the free-text request."""
    text = " ".join(str(query).split())
    lower = text.lower()
    qty = re.search(r"(\d[\d,]*)\s*(units?|pcs|pieces|pairs|boxes)?\b", lower)
    product = re.search(r"\bof\s+([^,;]+)", lower)
    days = re.search(r"within\s+(\d+)\s*(?:business\s+|working\s+)?days?", lower)
    region_text = None
    for pattern, _code in REGION_WORDS:
        found = re.search(pattern, lower)
        if found:
            region_text = found.group(0)
            break
    return {
        "query": text,
        "quantity": int(qty.group(1).replace(",", "")) if qty else None,
        "unit": (qty.group(2) or "units") if qty else None,
        "product": product.group(1).strip() if product else lower,
        "region_text": region_text,
        "max_delivery_days": int(days.group(1)) if days else None,
    }


def normalize_requirements(request: dict[str, Any], ctx: StepContext | None = None) -> dict[str, Any]:
    """Step 2: map the parsed request onto the corpus vocabulary (category, region code, certifications)."""
    product = request.get("product") or ""
    category = next((c for p, c in CATEGORY_WORDS if re.search(p, product)), "unknown")
    region = "unknown"
    if request.get("region_text"):
        region = next((code for p, code in REGION_WORDS if re.search(p, request["region_text"])), "unknown")
    keywords = [w for w in re.findall(r"[a-z0-9-]+", product) if w not in STOPWORDS]
    return {
        "category": category,
        "product": product,
        "quantity": request.get("quantity"),
        "region": region,
        "max_delivery_days": request.get("max_delivery_days") or 30,
        "required_certifications": CERTIFICATIONS.get((category, region), []),
        "currency": REPORTING_CURRENCY,
        "keywords": keywords,
        "for_next": _for_next(ctx),
    }


def plan_search(requirements: dict[str, Any]) -> dict[str, Any]:
    """Step 3: the search plan: hard filters, ranking keywords, how many candidates to fetch."""
    return {
        "filters": {"category": requirements["category"], "region": requirements["region"]},
        "keywords": requirements["keywords"],
        "required_certifications": requirements["required_certifications"],
        "top_k": TOP_K,
        "index": "vendors.json",
    }


# -- step 4: retrieval (where the fault is injected) --------------------------------------------

def retrieve_candidates(plan: dict[str, Any], inject_fault: bool = False,
                        ctx: StepContext | None = None) -> dict[str, Any]:
    """Step 4: search the vendor corpus.

    ``inject_fault`` switches to the stale index (see :func:`_stale_index_search`). A retry
    that carries gate feedback (``on_gate_fail: retry``, or a reviewer's retry) falls back to
    the strict search, the way a retriever told "too few relevant results" would re-query.
    """
    feedback = bool(ctx and any(not g.passed for g in ctx.gate_feedback))
    faulty = _truthy(inject_fault) and not feedback
    items = _stale_index_search(plan) if faulty else _strict_search(plan)
    out: dict[str, Any] = {"filters": plan["filters"], "index": plan.get("index", "vendors.json"),
                           "count": len(items), "items": items}
    if ctx is not None:
        out["for_next"] = _for_next(ctx)
        if feedback:
            out["requeried_after_feedback"] = True
    return out


def baseline_retrieve(plan: dict[str, Any], inject_fault: bool = False,
                      ctx: StepContext | None = None) -> dict[str, Any]:
    """Reference implementation of step 4 (always the strict search), for counterfactual attribution."""
    items = _strict_search(plan)
    return {"filters": plan["filters"], "index": plan.get("index", "vendors.json"),
            "count": len(items), "items": items}


# -- steps 5-13: analysis, all faithful to what step 4 returned ---------------------------------

def fetch_contract_terms(candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """Step 5: look up each candidate's contract terms by vendor id."""
    terms, missing = [], []
    for item in candidates:
        record = VENDORS.get(item["id"])
        if record is None:
            missing.append(item["id"])
            continue
        terms.append({"id": item["id"], "vendor_name": record["name"], "currency": record["currency"],
                      **record["contract"]})
    return {"terms": terms, "cited_ids": [t["id"] for t in terms], "missing": missing}


def extract_prices(candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """Step 6: unit prices as quoted, in the vendor's currency."""
    prices = [{"id": c["id"], "unit_price": c["unit_price"], "currency": c["currency"]} for c in candidates]
    return {"prices": prices, "min_unit_price": min((p["unit_price"] for p in prices), default=None)}


def normalize_currency(prices: list[dict[str, Any]]) -> dict[str, Any]:
    """Step 7: convert every quote to EUR at the corpus's fixed rates."""
    out = []
    for p in prices:
        rate = FX_TO_EUR[p["currency"]]
        out.append({"id": p["id"], "unit_price": p["unit_price"], "currency": p["currency"], "fx_rate": rate,
                    "unit_price_eur": round(p["unit_price"] * rate, 4)})
    return {"prices": out, "currency": REPORTING_CURRENCY,
            "min_unit_price_eur": min((p["unit_price_eur"] for p in out), default=None)}


def check_certifications(candidates: list[dict[str, Any]], requirements: dict[str, Any]) -> dict[str, Any]:
    """Step 8: which candidates hold every required certification."""
    required = requirements["required_certifications"]
    results = []
    for c in candidates:
        missing = [r for r in required if r not in c["certifications"]]
        results.append({"id": c["id"], "certified": not missing, "missing": missing})
    return {"required": required, "results": results,
            "certified_ids": [r["id"] for r in results if r["certified"]]}


def score_delivery(candidates: list[dict[str, Any]], requirements: dict[str, Any]) -> dict[str, Any]:
    """Step 9: who delivers within the deadline, and how comfortably."""
    max_days = requirements["max_delivery_days"]
    scores = [{"id": c["id"], "delivery_days": c["delivery_days"], "on_time": c["delivery_days"] <= max_days,
               "score": round(max(0.0, 1 - c["delivery_days"] / (2 * max_days)), 4)} for c in candidates]
    on_time = [s for s in scores if s["on_time"]]
    return {"max_delivery_days": max_days, "scores": scores, "on_time_ids": [s["id"] for s in on_time],
            "best_delivery_days": min((s["delivery_days"] for s in on_time), default=None)}


def compute_total_cost(prices: list[dict[str, Any]], terms: list[dict[str, Any]],
                       requirements: dict[str, Any]) -> dict[str, Any]:
    """Step 10: quantity x unit price + flat shipping, in EUR."""
    qty = requirements["quantity"]
    terms_by_id = _by_id(terms)
    totals = []
    for p in prices:
        shipping = terms_by_id[p["id"]]["shipping_flat"] if p["id"] in terms_by_id else 0.0
        shipping_eur = shipping * p["fx_rate"]
        total = p["unit_price_eur"] * qty + shipping_eur
        totals.append({"id": p["id"], "unit_price_eur": p["unit_price_eur"], "quantity": qty,
                       "shipping_eur": round(shipping_eur, 2), "total_eur": round(total, 2)})
    return {"quantity": qty, "currency": REPORTING_CURRENCY, "totals": totals,
            "cheapest_total_eur": min((t["total_eur"] for t in totals), default=None)}


def rank_vendors(candidates: list[dict[str, Any]], totals: list[dict[str, Any]],
                 certifications: dict[str, Any], delivery: dict[str, Any]) -> dict[str, Any]:
    """Step 11: rank eligible (certified, on-time) vendors by cost, delivery and rating."""
    max_days = delivery["max_delivery_days"]
    certified = set(certifications["certified_ids"])
    on_time = set(delivery["on_time_ids"])
    totals_by_id = _by_id(totals)
    eligible = [c for c in candidates if c["id"] in certified and c["id"] in on_time]
    best_total = min((totals_by_id[c["id"]]["total_eur"] for c in eligible), default=0.0)
    ranked = []
    for c in candidates:
        reasons = []
        if c["id"] not in certified:
            reasons.append("missing required certification")
        if c["id"] not in on_time:
            reasons.append(f"delivery {c['delivery_days']} days exceeds {max_days}")
        score = 0.0 if reasons else _composite(totals_by_id[c["id"]]["total_eur"], best_total,
                                               c["delivery_days"], max_days, c["rating"])
        ranked.append({"id": c["id"], "name": c["name"], "eligible": not reasons, "score": score,
                       "total_eur": totals_by_id[c["id"]]["total_eur"], "reasons": reasons})
    ranked.sort(key=lambda r: (-r["score"], r["id"]))
    for i, r in enumerate(ranked, start=1):
        r["rank"] = i
    top = ranked[0] if ranked and ranked[0]["eligible"] else None
    runner_up = ranked[1] if len(ranked) > 1 and ranked[1]["eligible"] else None
    if top and runner_up:
        margin = round(top["score"] - runner_up["score"], 4)
    else:
        margin = top["score"] if top else 0.0
    return {"ranking": ranked, "top": top, "runner_up": runner_up, "margin": margin,
            "eligible_count": sum(r["eligible"] for r in ranked)}


def risk_assessment(ranking: dict[str, Any], candidates: list[dict[str, Any]],
                    terms: list[dict[str, Any]]) -> dict[str, Any]:
    """Step 12: supplier risk of the top-ranked vendor (rating, warranty, payment terms)."""
    top = ranking["top"]
    record = _by_id(candidates)[top["id"]]
    contract = _by_id(terms).get(top["id"], {})
    factors = []
    if record["rating"] < 4.0:
        factors.append(f"rating {record['rating']} below 4.0")
    if contract.get("warranty_months", 0) < 12:
        factors.append(f"warranty {contract.get('warranty_months')} months")
    if contract.get("payment_terms") == "prepaid":
        factors.append("prepayment required")
    level = "low" if not factors else "medium" if len(factors) == 1 else "high"
    return {"vendor_id": top["id"], "level": level, "factors": factors}


def compliance_check(ranking: dict[str, Any], terms: list[dict[str, Any]], certifications: dict[str, Any],
                     requirements: dict[str, Any]) -> dict[str, Any]:
    """Step 13: the top vendor's contract against purchasing policy."""
    top_id = ranking["top"]["id"]
    contract = _by_id(terms).get(top_id, {})
    checks = [
        {"check": "certified", "passed": top_id in certifications["certified_ids"]},
        {"check": "payment_terms", "passed": contract.get("payment_terms") in ACCEPTED_PAYMENT_TERMS,
         "detail": contract.get("payment_terms")},
        {"check": "min_order", "passed": contract.get("min_order", 10**9) <= requirements["quantity"],
         "detail": contract.get("min_order")},
        {"check": "warranty", "passed": contract.get("warranty_months", 0) >= MIN_WARRANTY_MONTHS,
         "detail": contract.get("warranty_months")},
        {"check": "incoterms", "passed": contract.get("incoterms") in ACCEPTED_INCOTERMS,
         "detail": contract.get("incoterms")},
    ]
    ok = all(c["passed"] for c in checks)
    return {"vendor_id": top_id, "status": "compliant" if ok else "non_compliant", "checks": checks}


def compliance_passed(output: dict[str, Any]) -> GateResult:
    """Custom gate for step 13: every policy check passed, naming the ones that did not."""
    vid = output.get("vendor_id")
    checks = output.get("checks", [])
    failed = [c["check"] for c in checks if not c.get("passed")]
    if failed:
        return GateResult(False, 0.0, f"vendor {vid} fails policy checks: {', '.join(failed)}")
    return GateResult(True, 1.0, f"vendor {vid} passes {len(checks)} policy checks")


# -- steps 14-18: decide and explain ------------------------------------------------------------

def select_vendor(ranking: dict[str, Any], risk: dict[str, Any], compliance: dict[str, Any],
                  candidates: list[dict[str, Any]], totals: list[dict[str, Any]],
                  ctx: StepContext | None = None) -> dict[str, Any]:
    """Step 14: the chosen vendor with the figures the recommendation will quote."""
    top = ranking["top"]
    record = _by_id(candidates)[top["id"]]
    total = _by_id(totals)[top["id"]]
    return {
        "vendor_id": record["id"], "vendor_name": record["name"], "sku": record["sku"],
        "unit_price_quoted": record["unit_price"], "currency_quoted": record["currency"],
        "unit_price_eur": total["unit_price_eur"], "total_eur": total["total_eur"],
        "quantity": total["quantity"], "delivery_days": record["delivery_days"],
        "certifications": record["certifications"], "rank_score": top["score"],
        "risk": risk["level"], "compliance": compliance["status"], "for_next": _for_next(ctx),
    }


def estimate_confidence(ranking: dict[str, Any], selection: dict[str, Any]) -> dict[str, Any]:
    """Step 15: confidence from the ranking margin and data completeness.

    Note what it does not look at: retrieval relevance. A wrong record set that ranks cleanly
    yields a *higher* confidence, which is the seed's "confident and wrong".
    """
    fields = ("unit_price_eur", "delivery_days", "total_eur", "certifications")
    completeness = sum(selection.get(f) is not None for f in fields) / len(fields)
    confidence = min(0.97, 0.55 + 1.5 * ranking["margin"] + 0.25 * completeness)
    return {"vendor_id": selection["vendor_id"], "confidence": round(confidence, 3),
            "margin": ranking["margin"], "completeness": completeness,
            "eligible_count": ranking["eligible_count"]}


def draft_recommendation(selection: dict[str, Any], confidence: dict[str, Any], requirements: dict[str, Any],
                         ctx: StepContext | None = None) -> dict[str, Any]:
    """Step 16: the recommendation's figures, in the reporting currency."""
    return {
        "vendor_id": selection["vendor_id"], "vendor_name": selection["vendor_name"], "sku": selection["sku"],
        "quantity": selection["quantity"], "unit_price": round(selection["unit_price_eur"], 2),
        "currency": REPORTING_CURRENCY, "delivery_days": selection["delivery_days"],
        "total_cost": selection["total_eur"], "confidence": confidence["confidence"],
        "certifications": selection["certifications"], "risk": selection["risk"],
        "product": requirements["product"], "max_delivery_days": requirements["max_delivery_days"],
        "cited_ids": [selection["vendor_id"]], "for_next": _for_next(ctx),
    }


def write_rationale(draft: dict[str, Any]) -> str:
    """Step 17: a short rationale a requester can read."""
    return (
        f"Recommend {draft['vendor_name']} ({draft['vendor_id']}) for {draft['quantity']} units of "
        f"{draft['product']}: {draft['unit_price']:.2f} {draft['currency']} per unit, delivery in "
        f"{draft['delivery_days']} days within the {draft['max_delivery_days']}-day window, total "
        f"{draft['total_cost']:.2f} {draft['currency']} including shipping. Certified "
        f"{', '.join(draft['certifications'])}; {draft['risk']} supplier risk; confidence "
        f"{draft['confidence']:.2f}."
    )


def cite_sources(draft: dict[str, Any], terms: list[dict[str, Any]]) -> dict[str, Any]:
    """Step 18: where each quoted figure comes from."""
    vid = draft["vendor_id"]
    citations = [{"id": vid, "source": f"vendors.json#{vid}",
                  "supports": ["vendor_name", "unit_price", "delivery_days", "certifications"]}]
    if any(t["id"] == vid for t in terms):
        citations.append({"id": vid, "source": f"vendors.json#{vid}/contract",
                          "supports": ["total_cost", "risk"]})
    return {"citations": citations, "cited_ids": sorted({c["id"] for c in citations})}


# -- step 19: the critic (N against N+2) --------------------------------------------------------

def verify_recommendation(retrieval: dict[str, Any], recommendation: dict[str, Any],
                          requirements: dict[str, Any]) -> GateResult:
    """Step 19 (critic): check the drafted recommendation against the record retrieved for it.

    The record must exist in the retrieval output, fit the requirements (region, category,
    certifications), have been retrieved with relevance >= 0.7, and the recommendation's
    name, EUR unit price and delivery days must be that record's.
    """
    vid = recommendation.get("vendor_id")
    record = next((i for i in retrieval.get("items", []) if i.get("id") == vid), None)
    if record is None:
        return GateResult(False, 0.0, f"recommended vendor {vid} is not among the retrieved records",
                          details={"vendor_id": vid})
    expected_price = round(_to_eur(record["unit_price"], record["currency"]), 2)
    checks = {
        "region": record["region"] == requirements["region"],
        "category": record["category"] == requirements["category"],
        "certifications": all(c in record["certifications"] for c in requirements["required_certifications"]),
        "relevance": record.get("score", 0.0) >= RELEVANCE_THRESHOLD,
        "vendor_name": recommendation.get("vendor_name") == record["name"],
        "unit_price": abs(float(recommendation.get("unit_price", -1)) - expected_price) <= 0.01,
        "delivery_days": recommendation.get("delivery_days") == record["delivery_days"],
    }
    failed = [k for k, ok in checks.items() if not ok]
    shown = ("id", "name", "sku", "region", "country", "unit_price", "currency", "delivery_days", "score")
    details = {"vendor_id": vid, "checks": checks, "record": {k: record[k] for k in shown}}
    score = round(1 - len(failed) / len(checks), 3)
    if not failed:
        return GateResult(True, score, f"recommendation {vid} ({record['name']}) matches its retrieved "
                                       f"record and the requirements on all {len(checks)} checks", details)
    problems = []
    if "region" in failed:
        problems.append(f"record is {record['region']} ({record['country']}), "
                        f"requested {requirements['region']}")
    if "relevance" in failed:
        problems.append(f"retrieval relevance {record.get('score')} < {RELEVANCE_THRESHOLD}")
    problems.extend(f"{k} mismatch" for k in failed if k not in ("region", "relevance"))
    return GateResult(False, score,
                      f"recommendation {vid} ({record['name']}) does not fit: {'; '.join(problems)}", details)


# -- steps 20-23: act and report (after the critic) ---------------------------------------------

def reserve_budget(draft: dict[str, Any], ctx: StepContext | None = None) -> dict[str, Any]:
    """Step 20 (side effect): reserve the budget; in real life a call to the finance system.

    The reservation id derives from the idempotency key, so a retried or resumed step
    reserves the same budget line instead of a second one.
    """
    key = ctx.idempotency_key if ctx is not None else "no-ctx"
    digest = hashlib.sha256(f"{key}/{draft['vendor_id']}/{draft['total_cost']}".encode()).hexdigest()[:10]
    return {"reservation_id": f"RES-{digest}", "vendor_id": draft["vendor_id"],
            "amount_eur": draft["total_cost"], "status": "reserved", "idempotency_key": key}


def format_report(rationale: str, citations: dict[str, Any]) -> str:
    """Step 21: the report body (markdown)."""
    sources = ", ".join(c["source"] for c in citations["citations"])
    return f"# Procurement recommendation\n\n{rationale}\n\nSources: {sources}\n"


def notify_requester(draft: dict[str, Any], report: str, ctx: StepContext | None = None) -> dict[str, Any]:
    """Step 22 (side effect): e-mail the requester; here it only returns the message it would send."""
    key = ctx.idempotency_key if ctx is not None else "no-ctx"
    digest = hashlib.sha256(f"{key}/{report}".encode()).hexdigest()[:10]
    return {"message_id": f"MSG-{digest}", "to": "requester@example.com",
            "subject": f"Recommendation: {draft['vendor_name']} ({draft['vendor_id']})",
            "status": "queued", "idempotency_key": key}


def recommend(draft: dict[str, Any], rationale: str, citations: dict[str, Any],
              reservation: dict[str, Any], notification: dict[str, Any], query: str) -> dict[str, Any]:
    """Step 23: the final recommendation (the run's output)."""
    return {
        "vendor_id": draft["vendor_id"], "vendor_name": draft["vendor_name"], "sku": draft["sku"],
        "quantity": draft["quantity"], "unit_price": draft["unit_price"], "currency": draft["currency"],
        "delivery_days": draft["delivery_days"], "total_cost": draft["total_cost"],
        "rationale": rationale, "confidence": draft["confidence"], "cited_ids": citations["cited_ids"],
        "reservation_id": reservation["reservation_id"], "notification_id": notification["message_id"],
        "query": query,
    }


# -- the outcome evaluator ----------------------------------------------------------------------

def reference_choice(query: str = DEFAULT_QUERY) -> dict[str, Any]:
    """The correct answer for ``query``: the ground truth for the default query, else the
    pipeline run on the strict (baseline) retrieval."""
    if " ".join(query.split()).lower() == DEFAULT_QUERY.lower():
        return {"vendor_id": GROUND_TRUTH["vendor_id"], "unit_price": GROUND_TRUTH["unit_price"]}
    req = normalize_requirements(parse_request(query))
    items = baseline_retrieve(plan_search(req))["items"]
    if not items:
        return {"vendor_id": None, "unit_price": None}
    terms = fetch_contract_terms(items)["terms"]
    prices = normalize_currency(extract_prices(items)["prices"])["prices"]
    totals = compute_total_cost(prices, terms, req)["totals"]
    ranking = rank_vendors(items, totals, check_certifications(items, req), score_delivery(items, req))
    if ranking["top"] is None:
        return {"vendor_id": None, "unit_price": None}
    top = ranking["top"]["id"]
    return {"vendor_id": top, "unit_price": round(_by_id(totals)[top]["unit_price_eur"], 2)}


def score(output: Any) -> float:
    """Reward in [0, 1] for a final recommendation.

    1.0 for the correct vendor at the correct price; 0.5 for the correct vendor at a wrong
    price; 0.2 for a near-duplicate (same name family, wrong record); 0.0 otherwise.
    """
    if not isinstance(output, dict) or not output.get("vendor_id"):
        return 0.0
    truth = reference_choice(output.get("query") or DEFAULT_QUERY)
    if truth["vendor_id"] is None:
        return 0.0
    if output["vendor_id"] == truth["vendor_id"]:
        price = output.get("unit_price")
        ok = isinstance(price, int | float) and abs(price - truth["unit_price"]) <= 0.01
        return 1.0 if ok else 0.5
    family = " ".join(VENDORS[truth["vendor_id"]]["name"].split()[:2]).lower()
    if str(output.get("vendor_name", "")).lower().startswith(family):
        return 0.2
    return 0.0
