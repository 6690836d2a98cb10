/*
 * mpi_marks: every rank waits in MPI_Barrier and makes a forktrace mark
 * (an instant, "barrier N") right after it, a few times, then prints
 * where it ran. The ranks leave each barrier within a network latency of
 * each other, so on one aligned clock their marks of one barrier line up;
 * before each barrier rank r works (sleeps) for a time that differs by
 * rank, so that marks taken anywhere but right after the barrier would
 * not. Twenty rounds: on a busy machine a rank may wait for a CPU after
 * a barrier, and the tests judge the alignment by the best rounds. Built
 * with mpicc; the multi-host tests (tests/cluster/) run it across hosts
 * with mpirun.
 */
#include <forktrace.h>
#include <mpi.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define MPI_MARKS_ROUNDS 20

int main(int argc, char **argv)
{
	char host[256] = "?";
	char name[32];
	int rank, size;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	gethostname(host, sizeof(host) - 1);
	for (int i = 0; i < MPI_MARKS_ROUNDS; i++) {
		struct timespec work = {0, (long)(1 + (rank * 3 + i) % 5) * 1000000L};

		nanosleep(&work, NULL);
		snprintf(name, sizeof(name), "barrier %d", i);
		MPI_Barrier(MPI_COMM_WORLD);
		ft_instant(name);
	}
	printf("mpi_marks rank %d of %d on %s\n", rank, size, host);
	MPI_Finalize();
	return 0;
}
