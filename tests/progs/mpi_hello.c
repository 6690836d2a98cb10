/*
 * mpi_hello: every rank prints one line. Built with mpicc; the test runs
 * it with mpirun -np 4.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int rank, size;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	printf("mpi_hello rank %d of %d\n", rank, size);
	MPI_Finalize();
	return 0;
}
