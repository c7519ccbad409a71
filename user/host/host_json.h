/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The host's agent's JSON records besides its report (host_report__json): a change of tier,
 * and an alarm. Their schema is doc/host.schema.json.
 */
#ifndef HEAPTAP_HOST_JSON_H
#define HEAPTAP_HOST_JSON_H

#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

#include "host/host_report.h"

/* What a change of tier says: the process, its tiers, why; with the probes of the heaptap
 * that traced it (its attached record's, on the way back), and the --max-overhead it was
 * given, a share of its own CPU time (on the way up, else NAN). */
struct tier_change {
	const struct hproc *p;
	enum tier from, to;
	const char *reason;
	double share;
	json_object *probes;
	const struct finding *finding; /* named by the escalation that ends, or NULL */
	uint64_t time_ns;
};

int host_json__tier(FILE *f, const struct tier_change *c);
int host_json__alert(FILE *f, const struct host_alert *a, uint64_t time_ns);

const char *host_json__tier_name(enum tier t);

#endif
