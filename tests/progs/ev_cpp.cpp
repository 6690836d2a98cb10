// C++ in ev_funcs: the trace must show the demangled name
// evns::Widget::poke(int).
namespace evns
{
struct Widget {
	int v;
	int poke(int x);
};
int Widget::poke(int x)
{
	return v + x;
}
} // namespace evns

extern "C" int cpp_poke(int v);
extern "C" int cpp_poke(int v)
{
	evns::Widget w{v};
	return w.poke(1);
}
