// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/listen.h"

bool listen__split(const char *listen, char **host, char **port)
{
	const char *colon = strrchr(listen, ':'), *p;
	const char *h = "127.0.0.1";
	size_t hlen = strlen(h);
	unsigned long n;
	char *end;

	if (colon && colon > listen) {
		h = listen;
		hlen = colon - listen;
		/* An IPv6 address comes in brackets. */
		if (h[0] == '[') {
			if (h[hlen - 1] != ']' || hlen < 3)
				return false;
			h++;
			hlen -= 2;
		}
	}
	p = colon ? colon + 1 : listen;
	if (*p < '0' || *p > '9')
		return false;
	errno = 0;
	n = strtoul(p, &end, 10);
	if (errno || *end || n < 1 || n > 65535)
		return false;
	if (colon && strchr(listen, ':') != colon && listen[0] != '[')
		return false; /* an IPv6 address needs brackets */
	*host = strndup(h, hlen);
	*port = strdup(p);
	if (!*host || !*port) {
		free(*host);
		free(*port);
		return false;
	}
	return true;
}

bool listen__valid(const char *listen)
{
	char *host, *port;

	if (!listen__split(listen, &host, &port))
		return false;
	free(host);
	free(port);
	return true;
}
