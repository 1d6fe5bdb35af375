"""Steps and tools of the approval example: an order looked up by code, a refund that a person approves.

``issue_refund`` is the side effect: it appends the refund to ``$REFUND_LEDGER`` (default
``refunds.ledger`` in the current directory) and is listed with ``approve: true``, so the model's call
of it waits for a person. The orders are a fixed table: the example gives the same result every time.
"""

from __future__ import annotations

import os
import re
from typing import Any

ORDERS = {
    "1042": {"order_id": "1042", "item": "kettle", "paid": 39.0, "status": "delivered damaged"},
    "1077": {"order_id": "1077", "item": "headphones", "paid": 89.0, "status": "charged twice"},
    "2001": {"order_id": "2001", "item": "desk lamp", "paid": 25.0, "status": "in transit"},
}


def find_order(ticket: str) -> dict[str, Any]:
    """The order the ticket names (the first known order number in it), or an empty record."""
    for number in re.findall(r"\d+", ticket):
        if number in ORDERS:
            return ORDERS[number]
    return {"order_id": None, "item": None, "paid": 0.0, "status": "unknown"}


def issue_refund(order_id: str, amount: float) -> dict[str, Any]:
    """Refund an amount of money to the customer for an order."""
    order = ORDERS.get(order_id)
    if order is None:
        raise ValueError(f"no order {order_id!r}")
    if amount <= 0 or amount > order["paid"]:
        raise ValueError(f"a refund on order {order_id} must be more than 0 and at most {order['paid']:g}")
    with open(os.environ.get("REFUND_LEDGER", "refunds.ledger"), "a") as ledger:
        ledger.write(f"{order_id} {amount:.2f}\n")
    return {"order_id": order_id, "refunded": amount}


def send(reply: str, order: dict[str, Any]) -> dict[str, Any]:
    """What would go to the customer (the example sends nothing anywhere)."""
    return {"to_order": order.get("order_id"), "message": reply}
