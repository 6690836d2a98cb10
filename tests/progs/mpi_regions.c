/*
 * mpi_regions: rank r records r + 2 forktrace regions "step" (each a
 * sleep of 1 ms) and one region "exchange" around an MPI_Barrier, then
 * prints "mpi_regions rank R of N pid P". Built with mpicc; the HDF5
 * tests (tests/e2e/test_h5.py) run it with mpirun -np 2 and look for each
 * rank's regions in its rank group with scope-profiler's reader.
 */
#include <forktrace.h>
#include <mpi.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct timespec ms = {0, 1000000L};
	int rank, size;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (int i = 0; i < rank + 2; i++) {
		ft_region_begin("step");
		nanosleep(&ms, NULL);
		ft_region_end();
	}
	ft_region_begin("exchange");
	MPI_Barrier(MPI_COMM_WORLD);
	ft_region_end();
	printf("mpi_regions rank %d of %d pid %d\n", rank, size, (int)getpid());
	MPI_Finalize();
	return 0;
}
