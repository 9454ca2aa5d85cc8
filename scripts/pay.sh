#!/usr/bin/env bash
# Plays the payment gateway: signs one payment callback and sends it to ticketd.
#
# Usage: scripts/pay.sh [-i] [-w] ORDER_NO AMOUNT_CENTS [STATUS] [TXN_ID]
#
#   STATUS   SUCCESS (default) or FAILED
#   TXN_ID   the gateway's transaction id; a new random one by default.
#            Send the same one again to see the callback replayed.
#   -i       show the response's status line and headers too
#   -w       sign as Standard Webhooks (webhook-id, webhook-timestamp,
#            webhook-signature) instead of X-Pay-*
#
# Environment:
#   TICKETD_URL         where ticketd listens (default http://127.0.0.1:8080)
#   TICKETD_PAY_SECRET  the shared secret; by default the one in
#                       config/ticketd.env (or the file named by TICKETD_CONFIG);
#                       of two ("new,old", a rotation) the first signs
#   TICKETD_WEBHOOK_ID  with -w, the delivery's webhook-id; a new random one
#                       by default. The same id with the same arguments is a
#                       retry of that delivery (answered "replayed": true).
#
# The signature is one ticketd checks: lowercase hex
# HMAC-SHA256(secret, "<X-Pay-Timestamp>.<raw body>"), or with -w
# "v1,<base64 HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<raw body>")>",
# made by build/loadtest/ticketd-paysign (loadtest/common/paysign.c, the signer
# the load tool and the integration tests use too; built here when missing).
set -euo pipefail

usage() {
    sed -n '/^# Usage:/,/^# the load tool/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

show_headers=()
webhook=0
while [[ "${1:-}" == -* ]]; do
    case "$1" in
    -i) show_headers=(-i) ;;
    -w) webhook=1 ;;
    *) usage ;;
    esac
    shift
done
[[ $# -ge 2 && $# -le 4 ]] || usage

order_no=$1
amount=$2
status=${3:-SUCCESS}
txn_id=${4:-txn-$(date +%s)-$(openssl rand -hex 4)}

[[ "$order_no" =~ ^[0-9A-Za-z]{1,64}$ ]] || { echo "pay.sh: ORDER_NO looks wrong: $order_no" >&2; exit 2; }
[[ "$amount" =~ ^[0-9]{1,16}$ ]] || { echo "pay.sh: AMOUNT_CENTS must be a whole number of cents" >&2; exit 2; }
[[ "$status" == SUCCESS || "$status" == FAILED ]] || { echo "pay.sh: STATUS must be SUCCESS or FAILED" >&2; exit 2; }
# Kept to characters that need no JSON escaping here; ticketd accepts more.
[[ "$txn_id" =~ ^[A-Za-z0-9._:-]{1,64}$ ]] || { echo "pay.sh: TXN_ID: 1 to 64 of A-Z a-z 0-9 . _ : -" >&2; exit 2; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
secret=${TICKETD_PAY_SECRET:-}
if [[ -z "$secret" ]]; then
    env_file=${TICKETD_CONFIG:-$root/config/ticketd.env}
    if [[ -r "$env_file" ]]; then
        secret=$(sed -n 's/^[[:space:]]*TICKETD_PAY_SECRET=//p' "$env_file" | tail -n 1)
        secret=${secret%$'\r'}
        # The env file may quote the value.
        if [[ ${#secret} -ge 2 && ( ${secret:0:1} == '"' || ${secret:0:1} == "'" ) && ${secret: -1} == "${secret:0:1}" ]]; then
            secret=${secret:1:${#secret}-2}
        fi
    fi
fi
[[ -n "$secret" ]] || { echo "pay.sh: set TICKETD_PAY_SECRET (no secret found in ${env_file:-the environment})" >&2; exit 2; }

url=${TICKETD_URL:-http://127.0.0.1:8080}
body=$(printf '{"txn_id":"%s","order_no":"%s","amount_cents":%s,"status":"%s"}' \
    "$txn_id" "$order_no" "$amount" "$status")
ts=$(date +%s)
paysign=$root/build/loadtest/ticketd-paysign
if [[ ! -x "$paysign" ]]; then
    make -s -C "$root/loadtest" BUILD="$root/build/loadtest" "$paysign" >&2 || { echo "pay.sh: cannot build $paysign" >&2; exit 2; }
fi
# The secret goes through the environment: a command line is readable by
# every user of the machine.
if [[ $webhook -eq 1 ]]; then
    id=${TICKETD_WEBHOOK_ID:-msg_$(openssl rand -hex 12)}
    [[ "$id" =~ ^[A-Za-z0-9._:-]{1,64}$ ]] || { echo "pay.sh: TICKETD_WEBHOOK_ID: 1 to 64 of A-Z a-z 0-9 . _ : -" >&2; exit 2; }
    sig=$(printf '%s' "$body" | TICKETD_PAY_SECRET=$secret "$paysign" --webhook "$id" "$ts")
    echo "pay.sh: webhook-id $id, txn_id $txn_id (the same delivery again: TICKETD_WEBHOOK_ID=$id scripts/pay.sh -w $order_no $amount $status $txn_id)" >&2
    headers=(-H "webhook-id: $id" -H "webhook-timestamp: $ts" -H "webhook-signature: $sig")
else
    sig=$(printf '%s' "$body" | TICKETD_PAY_SECRET=$secret "$paysign" "$ts")
    echo "pay.sh: txn_id $txn_id (send it again: scripts/pay.sh $order_no $amount $status $txn_id)" >&2
    headers=(-H "X-Pay-Timestamp: $ts" -H "X-Pay-Signature: $sig")
fi
curl -sS "${show_headers[@]}" -X POST "$url/api/v1/payments/callback" \
    -H 'Content-Type: application/json' \
    "${headers[@]}" \
    --data-binary "$body"
echo
