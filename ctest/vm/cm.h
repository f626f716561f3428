/* rdma_cm helpers shared by the test programs that use librdmacm (cmsend.c,
 * select.c). Include after common.h (die). */
#ifndef RSVERBS_CTEST_CM_H
#define RSVERBS_CTEST_CM_H
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <string.h>

/* The next event on `ch`, which must be `want`; acknowledged, its UD
 * parameters copied to `ud` if given. */
static void expect_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want, struct rdma_ud_param *ud)
{
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(ch, &ev))
		die("rdma_get_cm_event: %s", strerror(errno));
	if (ev->event != want)
		die("got %s (status %d), wanted %s", rdma_event_str(ev->event), ev->status, rdma_event_str(want));
	if (ud)
		*ud = ev->param.ud;
	rdma_ack_cm_event(ev);
}

/* A numeric IPv4 or IPv6 address into `ss`; dies on anything else. */
static void addr_of(const char *s, struct sockaddr_storage *ss)
{
	struct addrinfo *ai, hints = { .ai_flags = AI_NUMERICHOST };
	if (getaddrinfo(s, NULL, &hints, &ai))
		die("not a numeric address: %s", s);
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
}

/* A UDP-port-space rdma_cm id on a new channel (*ch), bound by
 * rdma_resolve_addr from `src` to `dst`: rdma_cm has chosen the device,
 * port and GID entry. Dies on any failure. */
static struct rdma_cm_id *resolved_udp_id(struct rdma_event_channel **ch, struct sockaddr_storage *src,
					  struct sockaddr_storage *dst)
{
	struct rdma_cm_id *id;
	*ch = rdma_create_event_channel();
	if (!*ch || rdma_create_id(*ch, &id, NULL, RDMA_PS_UDP))
		die("rdma_create_id: %s", strerror(errno));
	if (rdma_resolve_addr(id, (struct sockaddr *)src, (struct sockaddr *)dst, 2000))
		die("rdma_resolve_addr: %s", strerror(errno));
	expect_event(*ch, RDMA_CM_EVENT_ADDR_RESOLVED, NULL);
	return id;
}
#endif
