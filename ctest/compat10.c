/* References the IBVERBS_1.0 compat symbols (struct ibv_qp_1_0 * and
 * struct ibv_context_1_0 * callers).
 * A correct rsverbs preload must NOT capture them; abi.sh checks the binding
 * with LD_DEBUG=bindings and LD_BIND_NOW (nothing is called). */
#include <infiniband/verbs.h>
#include <stdio.h>

extern int old_attach(void *qp, const union ibv_gid *gid, uint16_t lid);
extern int old_detach(void *qp, const union ibv_gid *gid, uint16_t lid);
extern int old_query_gid(void *context, uint8_t port_num, int index, union ibv_gid *gid);
__asm__(".symver old_attach, ibv_attach_mcast@IBVERBS_1.0");
__asm__(".symver old_detach, ibv_detach_mcast@IBVERBS_1.0");
__asm__(".symver old_query_gid, ibv_query_gid@IBVERBS_1.0");

int main(int argc, char **argv)
{
	(void)argv;
	if (argc > 99) /* never: keeps the references without calling them */
		return old_attach(0, 0, 0) + old_detach(0, 0, 0) + old_query_gid(0, 0, 0, 0);
	puts("compat10: loaded");
	return 0;
}
